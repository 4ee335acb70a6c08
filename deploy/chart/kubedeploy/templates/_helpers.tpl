{{/*
The namespace everything namespaced goes in: .Values.namespace, else the release's (helm install -n).
*/}}
{{- define "kubedeploy.namespace" -}}
{{- default .Release.Namespace .Values.namespace -}}
{{- end -}}

{{/*
The ServiceAccount the pods run as: .Values.serviceAccount.name, else deploy/'s (kubedeploy) or deploy/observe's
(kubedeploy-observe).
*/}}
{{- define "kubedeploy.serviceAccountName" -}}
{{- if .Values.serviceAccount.name -}}
{{- .Values.serviceAccount.name -}}
{{- else if eq .Values.mode "observe" -}}
kubedeploy-observe
{{- else -}}
kubedeploy
{{- end -}}
{{- end -}}

{{/*
The workload's name, which is also its pods' app.kubernetes.io/name label: deploy/'s names, fixed because the
Lease and ring names the binary defaults to are fixed too (one kubedeploy per cluster).
*/}}
{{- define "kubedeploy.name" -}}
{{- if eq .Values.mode "observe" -}}
kubedeploy-observe
{{- else if .Values.sharding.enabled -}}
kubedeploy-controllers-sharded
{{- else -}}
kubedeploy-controllers
{{- end -}}
{{- end -}}

{{/*
Labels Helm adds to every object, beside the ones deploy/ has: which release and chart made it.
*/}}
{{- define "kubedeploy.helmLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/*
The ServiceAccount as a RoleBinding subject.
*/}}
{{- define "kubedeploy.subject" -}}
- kind: ServiceAccount
  name: {{ include "kubedeploy.serviceAccountName" . }}
  namespace: {{ include "kubedeploy.namespace" . }}
{{- end -}}

{{/*
The image reference: repository:tag, tag defaulting to the chart's appVersion.
*/}}
{{- define "kubedeploy.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The pod security context and container security context deploy/ uses: non-root, no privilege, read-only root.
*/}}
{{- define "kubedeploy.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "kubedeploy.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/*
The flags of .Values.memoryPolicy, one "- --flag=value" line each, none for a value left to the binary.
*/}}
{{- define "kubedeploy.memoryPolicyArgs" -}}
{{- if not (kindIs "invalid" .Values.memoryPolicy.gcPercent) }}
- --gc-percent={{ .Values.memoryPolicy.gcPercent }}
{{- end }}
{{- with .Values.memoryPolicy.memoryLimit }}
- --memory-limit={{ . }}
{{- end }}
{{- end -}}
