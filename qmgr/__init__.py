"""qmgr: an emulator of IBM MQ-style clustered publish/subscribe, bridged to Azure Service
Bus-style topics.

gRPC's fork support is turned off (unless the environment says otherwise) before anything
imports grpc: with it on, grpcio 1.80 and later can abort a child process forked while a
channel is busy in gRPC's post-fork handler, before the child runs exec (upstream
grpc/grpc#43055). That is how PySpark starts its JVM and how a fork-based ``subprocess`` call
starts a program, so a Spark job or a node restarted from a process with live channels could
fail to start at random. qmgr never uses a gRPC channel across a fork.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
