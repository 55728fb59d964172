{{/* Names: the release name, unless it already says kiln. */}}
{{- define "kiln.fullname" -}}
{{- if contains "kiln" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-kiln" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kiln.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: kiln
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kiln
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component (api, operator, postgresql). */}}
{{- define "kiln.selectorLabels" -}}
app.kubernetes.io/name: kiln
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "kiln.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "kiln.secretsKeySecretName" -}}
{{- .Values.secretsKey.existingSecret | default (printf "%s-secrets-key" (include "kiln.fullname" .)) -}}
{{- end -}}

{{- define "kiln.jwtSecretName" -}}
{{- .Values.jwt.existingSecret | default (printf "%s-jwt" (include "kiln.fullname" .)) -}}
{{- end -}}

{{- define "kiln.databaseSecretName" -}}
{{- if .Values.postgresql.enabled -}}
{{- printf "%s-postgresql" (include "kiln.fullname" .) -}}
{{- else -}}
{{- required "database.existingSecret is required (a Secret with the PostgreSQL URL), or set postgresql.enabled=true for an evaluation database" .Values.database.existingSecret -}}
{{- end -}}
{{- end -}}

{{- define "kiln.databaseSecretKey" -}}
{{- if .Values.postgresql.enabled -}}url{{- else -}}{{ .Values.database.secretKey }}{{- end -}}
{{- end -}}

{{/* Pod Security "restricted" for kiln's own pods. */}}
{{- define "kiln.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "kiln.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/*
The build namespaces, as JSON: one entry per distinct name, in level order (restricted, baseline,
privileged; privileged only with builds.buildx.enabled), each with the most permissive level given
that name and whether the chart creates it (any level with that name says so). Read with
`include "kiln.buildNamespaces" . | fromJsonArray`.
*/}}
{{- define "kiln.buildNamespaces" -}}
{{- $levels := list "restricted" "baseline" }}
{{- if .Values.builds.buildx.enabled }}
{{- $levels = append $levels "privileged" }}
{{- end }}
{{- $byName := dict }}
{{- $names := list }}
{{- range $level := $levels }}
{{- $given := get $.Values.builds.namespaces $level }}
{{- $entry := get $byName $given.name }}
{{- if $entry }}
{{- $_ := set $entry "level" $level }}
{{- if $given.create }}
{{- $_ := set $entry "create" true }}
{{- end }}
{{- else }}
{{- $_ := set $byName $given.name (dict "name" $given.name "level" $level "create" $given.create) }}
{{- $names = append $names $given.name }}
{{- end }}
{{- end }}
{{- $list := list }}
{{- range $names }}
{{- $list = append $list (get $byName .) }}
{{- end }}
{{- toJson $list }}
{{- end -}}

{{/* Environment both roles share: the runner, where builds live, the database, the sealing key. */}}
{{- define "kiln.commonEnv" -}}
- name: KILN_RUNNER
  value: kubernetes
- name: KILN_BUILD_NAMESPACE_RESTRICTED
  value: {{ .Values.builds.namespaces.restricted.name | quote }}
- name: KILN_BUILD_NAMESPACE_BASELINE
  value: {{ .Values.builds.namespaces.baseline.name | quote }}
{{- if .Values.builds.buildx.enabled }}
- name: KILN_BUILD_NAMESPACE_PRIVILEGED
  value: {{ .Values.builds.namespaces.privileged.name | quote }}
{{- else }}
# No namespace admits privileged pods: buildx builds are refused.
- name: KILN_BUILD_ALLOW_PRIVILEGED
  value: "false"
{{- end }}
- name: KILN_DATA_DIR
  value: /var/lib/kiln
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "kiln.databaseSecretName" . }}
      key: {{ include "kiln.databaseSecretKey" . }}
# Admission: the operator admits, the API shows where a waiting build stands; both by one rule.
{{- with .Values.builds.admission }}
- name: KILN_ADMISSION
  value: {{ .mode | quote }}
{{- if eq .mode "kueue" }}
- name: KILN_KUEUE_LOCAL_QUEUE
  value: {{ .kueueLocalQueue | quote }}
{{- with .kueueLocalQueues }}
- name: KILN_KUEUE_LOCAL_QUEUES
  value: {{ include "kiln.kueueQueues" . | quote }}
{{- end }}
{{- end }}
{{- if not (kindIs "invalid" .maxRunning) }}
- name: KILN_MAX_RUNNING
  value: {{ .maxRunning | quote }}
{{- end }}
{{- if not (kindIs "invalid" .tenantMaxRunning) }}
- name: KILN_TENANT_MAX_RUNNING
  value: {{ .tenantMaxRunning | quote }}
{{- end }}
{{- if not (kindIs "invalid" .projectMaxRunning) }}
- name: KILN_PROJECT_MAX_RUNNING
  value: {{ .projectMaxRunning | quote }}
{{- end }}
- name: KILN_QUEUE_TTL_SECONDS
  value: {{ .queueTtlSeconds | quote }}
{{- if not (kindIs "invalid" .tenantMaxQueued) }}
- name: KILN_TENANT_MAX_QUEUED
  value: {{ .tenantMaxQueued | quote }}
{{- end }}
- name: KILN_OPERATOR_UNSCHEDULABLE_SECONDS
  value: {{ .unschedulableSeconds | quote }}
{{- end }}
# /metrics on its own port in every role, never on the main one that the Ingress routes to.
- name: KILN_METRICS_PORT
  value: {{ .Values.metrics.port | quote }}
- name: KILN_METRICS_TENANT_LABELS
  value: {{ .Values.metrics.tenantLabels | quote }}
# The API seals buildx secrets with it, the operator unseals them: both need the same key.
- name: KILN_SECRETS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "kiln.secretsKeySecretName" . }}
      key: {{ .Values.secretsKey.secretKey }}
{{- end -}}

{{/* The writable places of a kiln pod: the root filesystem is read-only. */}}
{{- define "kiln.volumes" -}}
- name: data
  emptyDir:
    sizeLimit: 1Gi
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end -}}

{{- define "kiln.volumeMounts" -}}
- name: data
  mountPath: /var/lib/kiln
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/*
Labels or annotations a user gave (podLabels, podAnnotations, serviceAccount.annotations), every
value a string: `--set …use=true` gives a boolean, and Kubernetes takes only strings here.
*/}}
{{- define "kiln.stringMap" -}}
{{- $strings := dict }}
{{- range $key, $value := . }}
{{- $_ := set $strings $key (toString $value) }}
{{- end }}
{{- toYaml $strings }}
{{- end -}}

{{/*
The Secret name of one credentialSecrets entry, checked: the render stops on anything Kubernetes
would refuse as a Secret name. Called with (dict "where" "operator.credentialSecrets[0]" "secret" …).
*/}}
{{- define "kiln.credentialSecretName" -}}
{{- if not (kindIs "map" .secret) }}
{{- fail (printf "%s must be a map with a Secret name and an optional mountPath ({ name: vault-token })" .where) }}
{{- end }}
{{- $name := toString (.secret.name | default "") }}
{{- if or (gt (len $name) 253) (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" $name)) }}
{{- fail (printf "%s.name %q is not a Secret name: a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)" .where $name) }}
{{- end }}
{{- $name }}
{{- end -}}

{{/*
The Secrets a component (api, operator) reads secret-manager credentials from (Vault tokenFile and
caFile, AWS credentialsFile, Azure federatedTokenFile and caFile), one volume each, named by
position: a Secret name may be longer than a volume name (63) and hold dots. The mode is 0400,
written in decimal so that no YAML 1.2 tool reads it as 400; the files belong to root, and the
kubelet lets the pod's fsGroup (kiln.podSecurityContext), which kiln's user is in, read them.
Called with (dict "component" "operator" "secrets" .Values.operator.credentialSecrets).
*/}}
{{- define "kiln.credentialVolumes" -}}
{{- range $index, $secret := .secrets }}
{{- $name := include "kiln.credentialSecretName" (dict "where" (printf "%s.credentialSecrets[%d]" $.component $index) "secret" $secret) }}
- name: credentials-{{ $index }}
  secret:
    secretName: {{ $name }}
    defaultMode: 256
{{- end }}
{{- end -}}

{{/*
Where those Secrets are mounted: mountPath, or /var/run/kiln/credentials/<name>. A path must be
absolute and used once, and may not hide the pod's writable places or its service-account token.
*/}}
{{- define "kiln.credentialVolumeMounts" -}}
{{- $taken := dict "/var/lib/kiln" "the data directory" "/tmp" "the temporary directory" "/var/run/secrets/kubernetes.io/serviceaccount" "the service-account token" }}
{{- range $index, $secret := .secrets }}
{{- $where := printf "%s.credentialSecrets[%d]" $.component $index }}
{{- $name := include "kiln.credentialSecretName" (dict "where" $where "secret" $secret) }}
{{- $path := $secret.mountPath | default (printf "/var/run/kiln/credentials/%s" $name) | toString }}
{{- if not (hasPrefix "/" $path) }}
{{- fail (printf "%s.mountPath %q must be an absolute path" $where $path) }}
{{- end }}
{{- $path = clean $path }}
{{- if hasKey $taken $path }}
{{- fail (printf "%s: mountPath %s is taken by %s" $where $path (get $taken $path)) }}
{{- end }}
{{- $_ := set $taken $path $where }}
- name: credentials-{{ $index }}
  mountPath: {{ $path | quote }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* KILN_KUEUE_LOCAL_QUEUES: <tenant id>=<queue>,… in a stable order. */}}
{{- define "kiln.kueueQueues" -}}
{{- $pairs := list -}}
{{- range $tenant, $queue := . -}}
{{- $pairs = append $pairs (printf "%s=%s" $tenant $queue) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/*
The annotations of a kiln pod: the scrape annotations (metrics.scrapeAnnotations) under the
user's podAnnotations, which win. Called with (dict "root" . "annotations" .Values.api.podAnnotations).
*/}}
{{- define "kiln.podAnnotations" -}}
{{- $annotations := dict }}
{{- with .root.Values.metrics }}
{{- if and .enabled .scrapeAnnotations }}
{{- $_ := set $annotations "prometheus.io/scrape" "true" }}
{{- $_ := set $annotations "prometheus.io/port" (toString .port) }}
{{- $_ := set $annotations "prometheus.io/path" "/metrics" }}
{{- end }}
{{- end }}
{{- range $key, $value := .annotations }}
{{- $_ := set $annotations $key (toString $value) }}
{{- end }}
{{- if $annotations }}
{{- toYaml $annotations }}
{{- end }}
{{- end -}}

{{/* The metrics port of a kiln container (metrics.enabled). */}}
{{- define "kiln.metricsContainerPort" -}}
{{- if .Values.metrics.enabled }}
- name: metrics
  containerPort: {{ .Values.metrics.port }}
  protocol: TCP
{{- end }}
{{- end -}}

{{/* The label matchers of every alert: metrics.prometheusRule.selector, or the release namespace. */}}
{{- define "kiln.alertSelector" -}}
{{- .Values.metrics.prometheusRule.selector | default (printf "namespace=%q" .Release.Namespace) -}}
{{- end -}}

{{/*
Where people and git hosts reach kiln (KILN_PUBLIC_URL): api.publicUrl, else the Ingress host
(https when it has a TLS Secret), else nothing.
*/}}
{{- define "kiln.publicUrl" -}}
{{- if .Values.api.publicUrl -}}
{{- .Values.api.publicUrl -}}
{{- else if .Values.ingress.enabled -}}
{{- printf "%s://%s" (ternary "https" "http" (ne .Values.ingress.tlsSecretName "")) .Values.ingress.host -}}
{{- end -}}
{{- end }}
