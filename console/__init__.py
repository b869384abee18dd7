"""strom's web console: a small aiohttp server and a plain HTML/CSS/JS page set.

It talks to any Kafka cluster through confluent-kafka's AdminClient and Consumer only (and to a
Connect worker through its REST API), so it works against Apache Kafka as well as strom. Every
asset is in ``strom/console/static``: no CDN, it works offline. ``strom console`` runs it, and
``strom dev`` starts it on http://127.0.0.1:8080 unless ``--no-console``.
"""
