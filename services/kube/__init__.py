"""The Kubernetes edge (DESIGN §8): one adapter every service that touches the API uses.

`client` (connection, QPS limit, raw JSON calls), `listwatch` (list, then watch from the listed
resourceVersion, resume, relist on 410 Gone, bookmarks), `nodes` and `pods` (pure translations between API objects and log events), and the
shells that act on the API (HAMi's annotation codecs are `contracts.hami`): `binder` (allocator), `status` (queue service), `podsource`
(admission) and `nodesource` (node agent).
"""
