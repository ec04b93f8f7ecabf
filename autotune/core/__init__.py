"""The vocabulary every layer uses: Config, Problem, Measurement, errors (types), YAML with
line numbers (yamlio), the cache folder (cachedir), credentials masked (redact), the version."""
