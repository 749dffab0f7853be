"""Reports: the HTML report of runs, records and comparisons
(:mod:`.html`, its templates in ``templates/``), the merge-request note
(:mod:`.mrnote`) and the main job's benchmark file (:mod:`.timings`).
"""
