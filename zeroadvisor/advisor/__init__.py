"""The check flow: lint plus estimate plus the search for the cheapest change that fits."""
