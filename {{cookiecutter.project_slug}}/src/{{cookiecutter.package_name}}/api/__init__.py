"""HTTP routes, one router per module; main.py includes them."""
