"""Value sets: immutable snapshots, the sources they come from, and the provider that caches them."""
