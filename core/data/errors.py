"""The error every data loader raises: what cannot be loaded as asked."""


class DatasetError(ValueError):
    """Data that cannot be loaded as asked; the message names the file and what was expected."""
