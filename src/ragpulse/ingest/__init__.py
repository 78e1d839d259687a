"""Sources that feed the engine: Kafka (:mod:`ragpulse.ingest.kafka`) and OTLP (:mod:`ragpulse.ingest.otlp`)."""
