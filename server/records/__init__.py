"""The system of record: look-ups through RecordSource.Lookup and the existence, ownership and rule checks on them."""
