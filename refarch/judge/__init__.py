"""Judging: what the checks found (:mod:`.checks`, their root causes
:mod:`.causes`, GPUs :mod:`.gpu`), the properties measured and judged
against the profile's reference (:mod:`.properties`, :mod:`.figures`,
:mod:`.neighbour`), a run's results (:mod:`.results`), the validation
records and the release gate (:mod:`.records`, :mod:`.gate`) and the
side-by-side comparison of two versions (:mod:`.compare`,
:mod:`.comparison`).
"""
