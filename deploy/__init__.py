"""Deployment helpers: the local cluster launcher (``deploy.local_cluster``), a systemd
unit, a network-namespace cluster script and a container file (see deploy/README.md)."""
