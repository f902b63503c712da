"""Where each element lives: fragment, sparse-metadata, scale and shared-memory layouts (GF(2) linear layouts) and the compressed-A host format."""
