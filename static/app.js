// Small progressive enhancements live here; every page works without it.
