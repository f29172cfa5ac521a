"""bojax."""
