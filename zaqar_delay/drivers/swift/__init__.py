"""The Swift data driver of zaqar-delay (``delay.swift``)."""
