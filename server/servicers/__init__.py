"""gRPC servicers: thin translations between the wire and the domain."""
