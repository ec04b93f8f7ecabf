"""The vocabulary every layer uses: Config, Problem, Measurement, errors and the error line
(types), YAML with line numbers (yamlio), the cache folder (cachedir), credentials masked
(redact), files opened without following links (files), the version."""
