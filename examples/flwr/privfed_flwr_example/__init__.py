"""privfed on Flower: MNIST softmax regression over virtual clients (see ../README.md)."""
