"""Cost: reference prices and the price book, what a lab costs, what the whole stack costs."""
