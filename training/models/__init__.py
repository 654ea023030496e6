"""Plain Keras models: no distribution code, no strategy imports."""
