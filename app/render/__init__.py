"""Pictures of an explanation: a PNG of heatmaps and a self-contained HTML page."""
