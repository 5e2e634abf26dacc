"""Data sets (CIFAR-10, scikit-learn digits, image folders, arrays in an .npz) and the model's preprocessing.
Imports only core.limits."""
