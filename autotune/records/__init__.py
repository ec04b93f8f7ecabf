"""Results as records: results/<gpu>/<shape>.json read, written, checked, exported, plotted."""
