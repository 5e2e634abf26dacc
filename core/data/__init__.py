"""Data sets (CIFAR-10, scikit-learn digits, image folders) and the model's preprocessing.
Imports only core.limits."""
