"""Tools the suite drives: Terraform (:mod:`.terraform`) and its security
rules (:mod:`.tfrules`), Ansible (:mod:`.ansible`), Molecule's role
scenarios and their reuse records (:mod:`.roles`, :mod:`.rolecache`),
gitlab-ci-local (:mod:`.pipeline`), the toolset image (:mod:`.toolset`) and
the host commands they need (:mod:`.hostcmds`, :mod:`.hosttrace`).
"""
