"""A samples table made ready for training: its rows checked and split, class weights, a forest as teacher."""
