"""What every stage shares: atomic publication, raster grids and COGs, progress logs, feature preparation,
background prefetching and the accuracy measures."""
