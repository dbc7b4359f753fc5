"""The gRPC health service name a node sets SERVING once it printed its READY line (in a
cluster: once it joined). Its own module so that a healthcheck imports nothing else."""

READY_SERVICE = "qmgr.node.Ready"
