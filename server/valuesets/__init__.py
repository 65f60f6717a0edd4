"""Value sets: following the owners' sources (watch, pull, resync) and holding each set's copy, fresh or why not."""
