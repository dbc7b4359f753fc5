"""Thin gRPC servicers: decode, call one domain method, encode. The only user of qmgr.wire on
the node side."""
