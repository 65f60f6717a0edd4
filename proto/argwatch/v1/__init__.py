"""The argwatch.v1 contract: stubs generated at build time from the .proto files beside this one."""
