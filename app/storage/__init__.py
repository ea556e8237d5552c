"""How every domain stores: one mechanism for a write (the order of locks, the precondition,
the stored document, the Idempotency-Key, the commit), one project-scoped repository and one
shape for a stored document and its download."""
