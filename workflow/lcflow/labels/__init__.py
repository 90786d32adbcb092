"""Stage 2: CORINE or the user's own reference data on the Sentinel-2 grid in the configured nomenclature,
and the samples table drawn from labels and cube."""
