"""Fault cases: each breaks one node of a deployed cluster the way a field
report did and names the message a check or property must then produce
(:mod:`.cases`).
"""
