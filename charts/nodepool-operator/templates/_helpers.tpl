{{/* Names and labels shared by every object of the chart. */}}

{{- define "nodepool-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the release name when it already contains the chart's name, so
a release called nodepool-operator names its objects as config/default does. */}}
{{- define "nodepool-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "nodepool-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "nodepool-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The manager's pods: what the Service, the PDB and the NetworkPolicy select. */}}
{{- define "nodepool-operator.podSelectorLabels" -}}
{{ include "nodepool-operator.selectorLabels" . }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "nodepool-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "nodepool-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: nodepool-operator
{{- end }}

{{- define "nodepool-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "nodepool-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: the name of an existing ServiceAccount (serviceAccount.create is false)" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "nodepool-operator.leaseNamespace" -}}
{{- default .Release.Namespace .Values.leaderElection.namespace }}
{{- end }}

{{- define "nodepool-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The arguments of `nodepool-operator run`, one per line. */}}
{{- define "nodepool-operator.args" -}}
- run
{{- if .Values.leaderElection.enabled }}
- --leader-elect
{{- if .Values.leaderElection.namespace }}
- {{ printf "--leader-election-namespace=%v" .Values.leaderElection.namespace | quote }}
{{- end }}
{{- end }}
{{- $cloud := .Values.cloud }}
{{- if eq $cloud.name "aws" }}
- --cloud=aws
{{- with $cloud.aws.region }}
- {{ printf "--aws-region=%v" . | quote }}
{{- end }}
{{- with $cloud.aws.profile }}
- {{ printf "--aws-profile=%v" . | quote }}
{{- end }}
{{- with $cloud.aws.endpointUrl }}
- {{ printf "--aws-endpoint-url=%v" . | quote }}
{{- end }}
{{- with $cloud.aws.instanceTypes }}
- {{ printf "--aws-instance-types=%v" (join "," .) | quote }}
{{- end }}
{{- else }}
- {{ printf "--cloud-state=%v" $cloud.simulated.statePath | quote }}
{{- if $cloud.simulated.allowAnyCluster }}
- --allow-simulated-cloud
{{- end }}
{{- if not (kindIs "invalid" $cloud.simulated.bootSeconds) }}
- {{ printf "--boot-seconds=%v" $cloud.simulated.bootSeconds | quote }}
{{- end }}
{{- if not $cloud.simulated.kubelets }}
- --no-simulated-kubelets
{{- end }}
{{- end }}
{{- /* Bind on all interfaces so the kubelet (probes) and Prometheus reach them. Spell out
0.0.0.0: kubeloop reads ":8081" as 127.0.0.1:8081, unlike controller-runtime. */}}
- --metrics-bind-address=0.0.0.0:{{ .Values.metrics.port }}
- --health-probe-bind-address=0.0.0.0:{{ .Values.health.port }}
{{- $op := .Values.operator }}
- {{ printf "--log-format=%v" $op.logFormat | quote }}
- {{ printf "--log-level=%v" $op.logLevel | quote }}
{{- with $op.labelSelector }}
- {{ printf "--label-selector=%v" . | quote }}
{{- end }}
{{- if not (kindIs "invalid" $op.registrationTimeoutSeconds) }}
- {{ printf "--registration-timeout=%v" $op.registrationTimeoutSeconds | quote }}
{{- end }}
{{- if not (kindIs "invalid" $op.nodeRepairSeconds) }}
- {{ printf "--node-repair-seconds=%v" $op.nodeRepairSeconds | quote }}
{{- end }}
{{- if not (kindIs "invalid" $op.maxNodeProvisionSeconds) }}
- {{ printf "--max-node-provision-time=%v" $op.maxNodeProvisionSeconds | quote }}
{{- end }}
{{- if not (kindIs "invalid" $op.imageResolveSeconds) }}
- {{ printf "--image-resolve-seconds=%v" $op.imageResolveSeconds | quote }}
{{- end }}
{{- if $op.installCRDs }}
- --install-crds
{{- end }}
{{- if .Values.webhook.enabled }}
- --webhook-port={{ .Values.webhook.port }}
{{- end }}
{{- range $op.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* The Secret holding the webhook's tls.crt and tls.key: cert-manager's, or one the user made. */}}
{{- define "nodepool-operator.webhookSecretName" -}}
{{- if .Values.webhook.certManager.enabled }}
{{- printf "%s-webhook-cert" (include "nodepool-operator.fullname" .) }}
{{- else }}
{{- required "webhook.certSecret: the name of a kubernetes.io/tls Secret holding the webhook's certificate (webhook.certManager.enabled is false)" .Values.webhook.certSecret }}
{{- end }}
{{- end }}
