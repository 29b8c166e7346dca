"""The plain parts one virtual node's state is made of (batching, ring, store, membership;
the anchor's seat lives with the anchor).  Parts hold data and their own transitions; they
import neither the node nor the membership protocol, so both can act on them."""
