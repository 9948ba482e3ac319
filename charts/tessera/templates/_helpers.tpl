{{/*
Names and labels shared by every object. Each service is a "component"; the table below is the
one place that says which Python module runs it and whether it talks to the Kubernetes API.
*/}}

{{- define "tessera.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's prefix; a release already named after the chart is not doubled. */}}
{{- define "tessera.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The services: values key → object name, module, and whether it reads the API (the scheduler
talks only to NATS, so it gets neither --in-cluster nor a service account token).
*/}}
{{- define "tessera.components" -}}
admission: { name: admission, module: services.admission, kube: true, user: admission }
queue: { name: queue, module: services.queue, kube: true, user: queue }
scheduler: { name: scheduler, module: services.scheduler, kube: false, user: scheduler }
allocator: { name: allocator, module: services.allocator, kube: true, user: allocator }
nodeAgent: { name: node-agent, module: services.nodeagent, kube: true, user: nodeagent }
{{- end -}}

{{- define "tessera.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "tessera.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tessera
{{- end -}}

{{/* Selector labels of one component: call with (dict "root" $ "component" "queue"). */}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tessera.componentLabels" -}}
{{ include "tessera.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tessera.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Where the services find NATS: the external URL, else the bundled StatefulSet's Service. */}}
{{- define "tessera.natsUrl" -}}
{{- if .Values.nats.external.url -}}
{{- .Values.nats.external.url -}}
{{- else -}}
{{- printf "%s://%s-nats.%s.svc:4222" (ternary "tls" "nats" (eq (include "tessera.natsTls" .) "true")) (include "tessera.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{- define "tessera.natsReplicas" -}}
{{- if .Values.nats.cluster.enabled -}}{{ .Values.nats.cluster.replicas }}{{- else -}}1{{- end -}}
{{- end -}}

{{/*
Replicas of the event streams: as asked, else one per bundled NATS server (R1 alone, R3 on a
3-server cluster). An external NATS says nothing about its size, so it gets 1 unless asked.
*/}}
{{- define "tessera.streamReplicas" -}}
{{- if .Values.nats.streamReplicas -}}
{{- .Values.nats.streamReplicas -}}
{{- else if .Values.nats.external.url -}}
1
{{- else -}}
{{- include "tessera.natsReplicas" . -}}
{{- end -}}
{{- end -}}

{{/*
The Secret of the NATS users' passwords (one key per user of files/permissions.json, and `route`
for the cluster routes): the given one, else the one the setup Job makes once (natssetup.yaml).
*/}}
{{- define "tessera.natsSecret" -}}
{{- .Values.nats.auth.existingSecret | default (printf "%s-nats-credentials" (include "tessera.fullname" .)) -}}
{{- end -}}

{{/* "true" when that Secret is needed: users (an external NATS is given the same ones), or the
bundled cluster's route password. */}}
{{- define "tessera.natsNeedsSecret" -}}
{{- if or .Values.nats.auth.enabled (and (not .Values.nats.external.url) (gt (int (include "tessera.natsReplicas" .)) 1)) -}}true{{- end -}}
{{- end -}}

{{/* "true" when the bundled NATS speaks TLS (clients and routes). */}}
{{- define "tessera.natsTls" -}}
{{- if and (not .Values.nats.external.url) .Values.nats.tls.enabled -}}true{{- end -}}
{{- end -}}

{{/* The TLS Secret (tls.crt, tls.key, ca.crt): given, cert-manager's, or the setup Job's. */}}
{{- define "tessera.natsTlsSecret" -}}
{{- .Values.nats.tls.existingSecret | default (printf "%s-nats-tls" (include "tessera.fullname" .)) -}}
{{- end -}}

{{/* What the setup Job makes: "users", "tls", both or neither (space-separated). */}}
{{- define "tessera.natsSetup" -}}
{{- if and (include "tessera.natsNeedsSecret" .) (not .Values.nats.auth.existingSecret) }} users{{ end -}}
{{- if and (include "tessera.natsTls" .) (not .Values.nats.tls.existingSecret) (not .Values.nats.tls.certManager.enabled) }} tls{{ end -}}
{{- end -}}

{{/* The names the servers' certificate holds: the client Service and every server's route name. */}}
{{- define "tessera.natsDnsNames" -}}
{{- $f := include "tessera.fullname" . -}}
{{- $ns := .Release.Namespace -}}
- {{ $f }}-nats
- {{ $f }}-nats.{{ $ns }}
- {{ $f }}-nats.{{ $ns }}.svc
- {{ $f }}-nats.{{ $ns }}.svc.cluster.local
- "*.{{ $f }}-nats-headless.{{ $ns }}.svc"
- "*.{{ $f }}-nats-headless.{{ $ns }}.svc.cluster.local"
{{- end -}}
