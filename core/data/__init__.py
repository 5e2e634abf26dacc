"""Data sets (CIFAR-10, scikit-learn digits, image folders) and the model's preprocessing.
The bottom of core: imports nothing from it."""
