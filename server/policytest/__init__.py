"""`argwatch policy test`: a policy's expected verdicts, written as YAML cases, checked offline by its Validator."""
