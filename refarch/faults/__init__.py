"""Fault cases: each breaks one node of a deployed cluster the way a field
report did and names the message a check or property must then produce:
what a case is (:mod:`.base`), the injections and reverts
(:mod:`.injections`) and the cases themselves (:mod:`.catalogue`).
"""
