"""Host models' rows as data classes (SPEC §2 "Model rows"): registration, checks, cascade."""
