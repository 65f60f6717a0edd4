"""What the gateway remembers between calls: the shared cache (Redis or local), side-effect operations, atomic files."""
