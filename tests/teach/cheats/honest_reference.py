"""The reference solution as it is. Kind: honest (must get 5/5)."""
# %% solution
