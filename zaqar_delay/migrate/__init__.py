"""``zaqar-delay-migrate``: move queues from Zaqar's own message store
(its ``redis``, ``mongodb`` or ``swift`` driver) into a zaqar-delay one.

``sources`` reads the old store through Zaqar's own driver classes,
``queues`` finds the queues to move, ``mover`` moves, verifies and
(optionally) deletes one queue at a time, ``progress`` reports, and
``cli`` reads ``zaqar.conf`` and the flags. docs/migration.md is the
operator's procedure.
"""
