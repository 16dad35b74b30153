"""zaqar-delay: storage drivers that give Zaqar queues delayed delivery,
message groups, retention and bounded redelivery."""
