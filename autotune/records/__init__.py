"""Results as records: results/<gpu>/<shape>.json read and written (results), checked again
(check), exported as a C header (export), plotted (report)."""
