"""The wire edge: the gRPC servicers, protobuf <-> domain translation, Admin API auth and listener limits.

The only part of the server that imports generated code and serves gRPC; everything it calls works on frozen
Python values."""
