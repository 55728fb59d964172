// Command render renders a Helm chart the way `helm template` of Helm v3.21 does, for tests on
// machines where no helm binary can be installed.
//
// It runs Helm's own template engine pieces (Go text/template with sprig) and re-implements, from
// Helm's source, everything around them that decides what a chart renders to: chart loading
// (.helmignore, Chart.yaml, values.yaml), value merging and coalescing, the render context
// (.Values, .Release, .Chart, .Capabilities, .Files, .Template), Helm's own template functions,
// and the way `helm template` splits, orders and prints manifests. YAML is read and written with
// yaml.v2 through JSON, as Helm's sigs.k8s.io/yaml does, so numbers, booleans and toYaml output
// come out as Helm prints them.
//
// Not modelled, on purpose: subcharts and dependencies (refused with an error); values.schema.json
// validation (kiln's chart tests validate values against the schema in TypeScript); toToml and
// fromToml (Helm's TOML library is not packaged here: calling them fails the render); --set,
// --set-string, --show-only, --output-dir and strict mode.
//
// Usage:
//
//	render --chart DIR [--values FILE]... [--set-json JSON] [--release-name NAME]
//	       [--namespace NS] [--upgrade] [--kube-version v1.32.0] [--api-versions a/v1,b/v1]...
//	       [--include-crds] [--notes]
//
// --set-json takes one JSON object of values, merged after the --values files exactly as one more
// values file would be (unlike helm's own --set-json, which takes key=json pairs).
package main

import (
	"bytes"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/Masterminds/semver"
	"github.com/Masterminds/sprig"
	yamlv2 "gopkg.in/yaml.v2"
	yamlv3 "gopkg.in/yaml.v3"
)

const (
	helmVersion = "v3.21.4"
	// helm template reports the Kubernetes version Helm was built against (client-go v0.36).
	defaultKubeVersion = "v1.36.0"
	maxReleaseNameLen  = 53
	maxIncludeDepth    = 1000
	notesSuffix        = "NOTES.txt"
	hookAnnotation     = "helm.sh/hook"
	// Helm wraps required/fail messages in these markers to pick them out of text/template's
	// error chain.
	errStart = "HELM_ERR_START"
	errEnd   = "HELM_ERR_END"
)

// defaultAPIVersions is what helm template answers .Capabilities.APIVersions with when no cluster
// is reachable: the group versions of client-go's scheme (v0.36) plus apiextensions.k8s.io.
var defaultAPIVersions = []string{
	"v1",
	"admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1alpha1",
	"admissionregistration.k8s.io/v1beta1",
	"internal.apiserver.k8s.io/v1alpha1",
	"apps/v1", "apps/v1beta1", "apps/v1beta2",
	"authentication.k8s.io/v1", "authentication.k8s.io/v1alpha1", "authentication.k8s.io/v1beta1",
	"authorization.k8s.io/v1", "authorization.k8s.io/v1beta1",
	"autoscaling/v1", "autoscaling/v2",
	"batch/v1", "batch/v1beta1",
	"certificates.k8s.io/v1", "certificates.k8s.io/v1alpha1", "certificates.k8s.io/v1beta1",
	"coordination.k8s.io/v1", "coordination.k8s.io/v1alpha2", "coordination.k8s.io/v1beta1",
	"discovery.k8s.io/v1", "discovery.k8s.io/v1beta1",
	"events.k8s.io/v1", "events.k8s.io/v1beta1",
	"extensions/v1beta1",
	"flowcontrol.apiserver.k8s.io/v1", "flowcontrol.apiserver.k8s.io/v1beta1",
	"flowcontrol.apiserver.k8s.io/v1beta2", "flowcontrol.apiserver.k8s.io/v1beta3",
	"networking.k8s.io/v1", "networking.k8s.io/v1beta1",
	"node.k8s.io/v1", "node.k8s.io/v1alpha1", "node.k8s.io/v1beta1",
	"policy/v1", "policy/v1beta1",
	"rbac.authorization.k8s.io/v1", "rbac.authorization.k8s.io/v1alpha1",
	"rbac.authorization.k8s.io/v1beta1",
	"resource.k8s.io/v1", "resource.k8s.io/v1alpha3", "resource.k8s.io/v1beta1",
	"resource.k8s.io/v1beta2",
	"scheduling.k8s.io/v1", "scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1",
	"storage.k8s.io/v1", "storage.k8s.io/v1alpha1", "storage.k8s.io/v1beta1",
	"storagemigration.k8s.io/v1beta1",
	"apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1",
}

// installOrder is the kind order helm template prints manifests in; other kinds follow,
// alphabetically.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

var hookEvents = map[string]bool{
	"pre-install": true, "post-install": true, "pre-delete": true, "post-delete": true,
	"pre-upgrade": true, "post-upgrade": true, "pre-rollback": true, "post-rollback": true,
	"test": true, "test-success": true,
}

var (
	validReleaseName  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	manifestSeparator = regexp.MustCompile(`(?:^|\s*\n)---\s*`)
	helmErrorMessage  = regexp.MustCompile(errStart + `((?s).*)` + errEnd)
	kubeVersionParts  = regexp.MustCompile(`^\s*v?([0-9]+(?:\.[0-9]+)*)(.*)*$`)
	utf8BOM           = []byte{0xEF, 0xBB, 0xBF}
)

func main() {
	opts, err := parseOptions(os.Args[1:])
	if err == nil {
		var out string
		if out, err = run(opts); err == nil {
			_, err = os.Stdout.WriteString(out)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %s\n", err)
		os.Exit(1)
	}
}

type options struct {
	chartDir    string
	valuesFiles []string
	setJSON     string
	releaseName string
	namespace   string
	upgrade     bool
	kubeVersion string
	apiVersions []string
	includeCRDs bool
	notesOnly   bool
}

// stringList is a repeatable flag; with split set, each use may also hold a comma-separated list.
type stringList struct {
	values *[]string
	split  bool
}

func (l stringList) String() string { return "" }

func (l stringList) Set(value string) error {
	if l.split {
		*l.values = append(*l.values, strings.Split(value, ",")...)
	} else {
		*l.values = append(*l.values, value)
	}
	return nil
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.chartDir, "chart", "", "chart directory")
	fs.Var(stringList{values: &o.valuesFiles}, "values", "values file (repeatable, later wins)")
	fs.StringVar(&o.setJSON, "set-json", "", "JSON object of values merged after the files")
	fs.StringVar(&o.releaseName, "release-name", "release-name", "release name")
	fs.StringVar(&o.namespace, "namespace", "default", "release namespace")
	fs.BoolVar(&o.upgrade, "upgrade", false, "set .Release.IsUpgrade instead of .Release.IsInstall")
	fs.StringVar(&o.kubeVersion, "kube-version", "", "Kubernetes version for .Capabilities")
	fs.Var(stringList{values: &o.apiVersions, split: true}, "api-versions", "extra API versions")
	fs.BoolVar(&o.includeCRDs, "include-crds", false, "print the chart's crds/ first")
	fs.BoolVar(&o.notesOnly, "notes", false, "print only the rendered templates/NOTES.txt")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if o.chartDir == "" {
		return o, errors.New("--chart is required")
	}
	return o, nil
}

// run follows helm template's order of checks, so the first error reported is the one helm reports.
func run(o options) (string, error) {
	caps, err := newCapabilities(o.kubeVersion, o.apiVersions)
	if err != nil {
		return "", err
	}
	userValues, err := readUserValues(o.valuesFiles, o.setJSON)
	if err != nil {
		return "", err
	}
	ch, err := loadChart(o.chartDir)
	if err != nil {
		return "", err
	}
	if err := checkRenderable(ch); err != nil {
		return "", err
	}
	if err := validateReleaseName(o.releaseName); err != nil {
		return "", err
	}
	values := coalesceValues(ch.values, userValues)
	if constraint := ch.metadata.KubeVersion; constraint != "" && !compatible(constraint, caps.KubeVersion.Version) {
		return "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s",
			constraint, caps.KubeVersion.Version)
	}
	release := map[string]interface{}{
		"Name":      o.releaseName,
		"Namespace": o.namespace,
		"IsUpgrade": o.upgrade,
		"IsInstall": !o.upgrade,
		"Revision":  1,
		"Service":   "Helm",
	}
	rendered, err := renderTemplates(ch, renderContext(ch, values, release, caps))
	if err != nil {
		return "", err
	}
	notes := takeNotes(rendered, ch.metadata.Name)
	if o.notesOnly {
		return notes, nil
	}
	hooks, manifests, err := sortManifests(rendered)
	if err != nil {
		return "", err
	}
	var crds []chartFile
	if o.includeCRDs {
		crds = ch.crds()
	}
	return formatStream(ch.metadata.Name, crds, manifests, hooks), nil
}

// ---------------------------------------------------------------------------------------------
// YAML the way Helm reads and writes it (sigs.k8s.io/yaml: yaml.v2 through encoding/json).

// unmarshalYAML decodes YAML into target as sigs.k8s.io/yaml does: yaml.v2 (YAML 1.1, so yes/no
// are booleans) into a JSON-compatible tree, then encoding/json. Untyped numbers therefore become
// float64, and numbers or booleans bound for a string field become strings.
func unmarshalYAML(data []byte, target interface{}) error {
	var tree interface{}
	if err := yamlv2.Unmarshal(data, &tree); err != nil {
		return fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	jsonable, err := toJSONable(tree, reflect.TypeOf(target))
	if err != nil {
		return fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	encoded, err := json.Marshal(jsonable)
	if err != nil {
		return fmt.Errorf("error converting YAML to JSON: %w", err)
	}
	// Decoding through an interface holding the pointer leaves target untouched on `null`, as
	// sigs.k8s.io/yaml does (an empty values file gives an empty map, not a nil one).
	var holder interface{} = target
	if err := json.NewDecoder(bytes.NewReader(encoded)).Decode(&holder); err != nil {
		return fmt.Errorf("error unmarshaling JSON: while decoding JSON: %w", err)
	}
	return nil
}

// toJSONable turns yaml.v2's tree into one encoding/json accepts, stringifying map keys and
// scalars whose destination (found by walking target) is a string.
func toJSONable(node interface{}, target reflect.Type) (interface{}, error) {
	for target != nil && target.Kind() == reflect.Ptr {
		target = target.Elem()
	}
	switch typed := node.(type) {
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(typed))
		for key, value := range typed {
			name, err := yamlKeyString(key, value)
			if err != nil {
				return nil, err
			}
			if out[name], err = toJSONable(value, memberType(target, name)); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []interface{}:
		var elem reflect.Type
		if target != nil && target.Kind() == reflect.Slice {
			elem = target.Elem()
		}
		out := make([]interface{}, len(typed))
		for i, value := range typed {
			var err error
			if out[i], err = toJSONable(value, elem); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		if target != nil && target.Kind() == reflect.String {
			if s, ok := scalarString(node); ok {
				return s, nil
			}
		}
		return node, nil
	}
}

func yamlKeyString(key, value interface{}) (string, error) {
	switch typed := key.(type) {
	case string:
		return typed, nil
	case int, int64, float64, bool:
		s, _ := scalarString(typed)
		return s, nil
	}
	return "", fmt.Errorf("unsupported map key of type: %s, key: %+#v, value: %+#v",
		reflect.TypeOf(key), key, value)
}

// scalarString formats a YAML number or boolean the way yaml.v2 would write it.
func scalarString(v interface{}) (string, bool) {
	switch typed := v.(type) {
	case int:
		return strconv.Itoa(typed), true
	case int64:
		return strconv.FormatInt(typed, 10), true
	case uint64:
		return strconv.FormatUint(typed, 10), true
	case bool:
		return strconv.FormatBool(typed), true
	case float64:
		s := strconv.FormatFloat(typed, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, true
	}
	return "", false
}

// memberType is the type a JSON object member named key decodes into within target.
func memberType(target reflect.Type, key string) reflect.Type {
	if target == nil {
		return nil
	}
	switch target.Kind() {
	case reflect.Map:
		return target.Elem()
	case reflect.Struct:
		var folded reflect.Type
		for i := 0; i < target.NumField(); i++ {
			field := target.Field(i)
			name := strings.Split(field.Tag.Get("json"), ",")[0]
			if field.PkgPath != "" || name == "-" {
				continue
			}
			if name == "" {
				name = field.Name
			}
			if name == key {
				return field.Type
			}
			if folded == nil && strings.EqualFold(name, key) {
				folded = field.Type
			}
		}
		return folded
	}
	return nil
}

// marshalYAML writes v as sigs.k8s.io/yaml.Marshal does: JSON first (json tags, sorted keys),
// then yaml.v2, whose block sequences are not indented under their key.
func marshalYAML(v interface{}) ([]byte, error) {
	encoded, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var tree interface{}
	if err := yamlv2.Unmarshal(encoded, &tree); err != nil {
		return nil, err
	}
	return yamlv2.Marshal(tree)
}

// ---------------------------------------------------------------------------------------------
// Values.

// readUserValues merges the values files in order, then the --set-json object, as helm's
// values.Options.MergeValues does: maps merge deeply, anything else (null included) replaces.
func readUserValues(files []string, setJSON string) (map[string]interface{}, error) {
	base := map[string]interface{}{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		current := map[string]interface{}{}
		if err := unmarshalYAML(data, &current); err != nil {
			return nil, fmt.Errorf("failed to parse %s: %w", file, err)
		}
		base = mergeMaps(base, current)
	}
	if setJSON != "" {
		current := map[string]interface{}{}
		if err := unmarshalYAML([]byte(setJSON), &current); err != nil {
			return nil, fmt.Errorf("failed parsing --set-json data %s", setJSON)
		}
		base = mergeMaps(base, current)
	}
	return base, nil
}

func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for key, value := range a {
		out[key] = value
	}
	for key, value := range b {
		next, nextIsTable := value.(map[string]interface{})
		prev, prevIsTable := out[key].(map[string]interface{})
		if nextIsTable && prevIsTable {
			out[key] = mergeMaps(prev, next)
		} else {
			out[key] = value
		}
	}
	return out
}

// coalesceValues lays the user's values over the chart's values.yaml as Helm's
// chartutil.CoalesceValues does for a chart without subcharts: a user's null deletes the chart's
// default, tables merge, and the user wins otherwise.
func coalesceValues(defaults, user map[string]interface{}) map[string]interface{} {
	dst := deepCopy(user).(map[string]interface{})
	for key, def := range deepCopy(defaults).(map[string]interface{}) {
		value, set := dst[key]
		switch {
		case !set:
			dst[key] = def
		case value == nil:
			// At the top level Helm deletes even when the chart's default is null too.
			delete(dst, key)
		case isTable(value):
			if isTable(def) {
				coalesceTables(value.(map[string]interface{}), def.(map[string]interface{}), key)
			} else if def != nil {
				warn("warning: skipped value for %s: Not a table.", key)
			}
		}
	}
	return dst
}

func coalesceTables(dst, src map[string]interface{}, prefix string) {
	for key, def := range src {
		fullKey := prefix + "." + key
		value, set := dst[key]
		switch {
		case !set:
			dst[key] = def
		case value == nil:
			// A user's null removes a chart default; a null the chart does not override stays.
			if def != nil {
				delete(dst, key)
			}
		case isTable(def):
			if isTable(value) {
				coalesceTables(value.(map[string]interface{}), def.(map[string]interface{}), fullKey)
			} else {
				warn("warning: cannot overwrite table with non table for %s (%v)", fullKey, def)
			}
		case isTable(value) && def != nil:
			warn("warning: destination for %s is a table. Ignoring non-table value (%v)", fullKey, def)
		}
	}
}

func isTable(v interface{}) bool {
	_, ok := v.(map[string]interface{})
	return ok
}

func deepCopy(v interface{}) interface{} {
	switch typed := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(typed))
		for key, value := range typed {
			out[key] = deepCopy(value)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(typed))
		for i, value := range typed {
			out[i] = deepCopy(value)
		}
		return out
	}
	return v
}

// warn prints what Helm logs to stderr while coalescing; the render goes on.
func warn(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
}

// ---------------------------------------------------------------------------------------------
// Chart loading (Helm's loader.LoadDir and LoadFiles, for one chart without dependencies).

// Metadata mirrors Helm's chart.Metadata: templates see its fields under .Chart.
type Metadata struct {
	Name         string            `json:"name,omitempty"`
	Home         string            `json:"home,omitempty"`
	Sources      []string          `json:"sources,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
	Keywords     []string          `json:"keywords,omitempty"`
	Maintainers  []*Maintainer     `json:"maintainers,omitempty"`
	Icon         string            `json:"icon,omitempty"`
	APIVersion   string            `json:"apiVersion,omitempty"`
	Condition    string            `json:"condition,omitempty"`
	Tags         string            `json:"tags,omitempty"`
	AppVersion   string            `json:"appVersion,omitempty"`
	Deprecated   bool              `json:"deprecated,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	KubeVersion  string            `json:"kubeVersion,omitempty"`
	Dependencies []*Dependency     `json:"dependencies,omitempty"`
	Type         string            `json:"type,omitempty"`
}

// Maintainer mirrors Helm's chart.Maintainer.
type Maintainer struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
	URL   string `json:"url,omitempty"`
}

// Dependency mirrors Helm's chart.Dependency; a chart declaring any is refused.
type Dependency struct {
	Name         string        `json:"name"`
	Version      string        `json:"version,omitempty"`
	Repository   string        `json:"repository"`
	Condition    string        `json:"condition,omitempty"`
	Tags         []string      `json:"tags,omitempty"`
	Enabled      bool          `json:"enabled,omitempty"`
	ImportValues []interface{} `json:"import-values,omitempty"`
	Alias        string        `json:"alias,omitempty"`
}

type chartFile struct {
	name string // slash-separated, relative to the chart directory
	data []byte
}

type chart struct {
	metadata  *Metadata
	values    map[string]interface{}
	templates []chartFile
	files     []chartFile // everything .Files serves: not Chart.yaml, values.yaml, templates/
	subcharts []string
}

func loadChart(dir string) (*chart, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("path %q not found", dir)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: chart archives are not supported", dir)
	}
	rules, err := readIgnoreRules(filepath.Join(dir, ".helmignore"))
	if err != nil {
		return nil, err
	}
	var files []chartFile
	if err := walkChart(dir, "", rules, &files); err != nil {
		return nil, err
	}
	return assembleChart(files)
}

// walkChart collects the chart's files in lexical order, following symlinks as Helm's
// sympath.Walk does, and skipping what .helmignore (plus Helm's default rule) ignores.
func walkChart(dir, rel string, rules []ignoreRule, files *[]chartFile) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, entry := range entries {
		full := filepath.Join(dir, entry.Name())
		name := path.Join(rel, entry.Name())
		info, err := os.Stat(full)
		if err != nil {
			return err
		}
		if ignored(rules, name, info.IsDir()) {
			continue
		}
		if info.IsDir() {
			if err := walkChart(full, name, rules, files); err != nil {
				return err
			}
			continue
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("cannot load irregular file %s as it has file mode type bits set", full)
		}
		data, err := os.ReadFile(full)
		if err != nil {
			return fmt.Errorf("error reading %s: %w", name, err)
		}
		*files = append(*files, chartFile{name: name, data: bytes.TrimPrefix(data, utf8BOM)})
	}
	return nil
}

func assembleChart(files []chartFile) (*chart, error) {
	ch := &chart{values: map[string]interface{}{}}
	for _, f := range files {
		if f.name == "Chart.yaml" {
			ch.metadata = &Metadata{}
			if err := unmarshalYAML(f.data, ch.metadata); err != nil {
				return nil, fmt.Errorf("cannot load Chart.yaml: %w", err)
			}
			if ch.metadata.APIVersion == "" {
				ch.metadata.APIVersion = "v1"
			}
		}
	}
	if ch.metadata == nil {
		return nil, errors.New("Chart.yaml file is missing")
	}
	for _, f := range files {
		switch {
		case f.name == "Chart.yaml", f.name == "Chart.lock":
		case f.name == "requirements.lock":
			if ch.metadata.APIVersion == "v1" {
				ch.files = append(ch.files, f)
			}
		case f.name == "values.yaml":
			if err := unmarshalYAML(f.data, &ch.values); err != nil {
				return nil, fmt.Errorf("cannot load values.yaml: %w", err)
			}
		case f.name == "values.schema.json":
			// Not validated here: kiln's chart tests validate values against it in TypeScript.
		case f.name == "requirements.yaml":
			if err := unmarshalYAML(f.data, ch.metadata); err != nil {
				return nil, fmt.Errorf("cannot load requirements.yaml: %w", err)
			}
			if ch.metadata.APIVersion == "v1" {
				ch.files = append(ch.files, f)
			}
		case strings.HasPrefix(f.name, "templates/"):
			ch.templates = append(ch.templates, f)
		case strings.HasPrefix(f.name, "charts/") && path.Ext(f.name) != ".prov":
			// Helm skips charts/ entries whose name starts with _ or .; any other is a subchart.
			sub := strings.SplitN(strings.TrimPrefix(f.name, "charts/"), "/", 2)[0]
			if !strings.HasPrefix(sub, "_") && !strings.HasPrefix(sub, ".") {
				ch.subcharts = append(ch.subcharts, sub)
			}
		default:
			ch.files = append(ch.files, f)
		}
	}
	return ch, ch.metadata.validate()
}

// validate applies Helm's chart.Metadata.Validate checks that concern a chart without dependencies.
func (md *Metadata) validate() error {
	for _, field := range []*string{&md.Name, &md.Description, &md.Home, &md.Icon, &md.Condition,
		&md.Tags, &md.AppVersion, &md.KubeVersion} {
		*field = sanitize(*field)
	}
	for i := range md.Sources {
		md.Sources[i] = sanitize(md.Sources[i])
	}
	for i := range md.Keywords {
		md.Keywords[i] = sanitize(md.Keywords[i])
	}
	switch {
	case md.APIVersion == "":
		return errors.New("validation: chart.metadata.apiVersion is required")
	case md.Name == "":
		return errors.New("validation: chart.metadata.name is required")
	case md.Name == "." || md.Name == "..":
		return fmt.Errorf("validation: chart.metadata.name %q is not allowed", md.Name)
	case md.Name != filepath.Base(md.Name):
		return fmt.Errorf("validation: chart.metadata.name %q is invalid", md.Name)
	case md.Version == "":
		return errors.New("validation: chart.metadata.version is required")
	}
	if _, err := semver.NewVersion(md.Version); err != nil {
		return fmt.Errorf("validation: chart.metadata.version %q is invalid", md.Version)
	}
	switch md.Type {
	case "", "application", "library":
	default:
		return errors.New("validation: chart.metadata.type must be application or library")
	}
	for _, m := range md.Maintainers {
		if m == nil {
			return errors.New("validation: maintainers must not contain empty or null nodes")
		}
		m.Name, m.Email, m.URL = sanitize(m.Name), sanitize(m.Email), sanitize(m.URL)
	}
	return nil
}

// sanitize turns whitespace into spaces and drops unprintable runes, as Helm does to metadata.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return ' '
		}
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
}

// checkRenderable refuses what helm template refuses, and the subcharts this renderer does not
// model (Helm would render them with scoped values; silently skipping them would be wrong).
func checkRenderable(ch *chart) error {
	switch ch.metadata.Type {
	case "", "application":
	default:
		return fmt.Errorf("%s charts are not installable", ch.metadata.Type)
	}
	if len(ch.subcharts) > 0 || len(ch.metadata.Dependencies) > 0 {
		return fmt.Errorf("chart %s has subcharts or dependencies, which this renderer does not support",
			ch.metadata.Name)
	}
	return nil
}

// crds are the chart's crds/ manifests, printed first by helm template --include-crds.
func (ch *chart) crds() []chartFile {
	var crds []chartFile
	for _, f := range ch.files {
		ext := strings.ToLower(path.Ext(f.name))
		if strings.HasPrefix(f.name, "crds/") && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			crds = append(crds, f)
		}
	}
	return crds
}

func validateReleaseName(name string) error {
	if name == "" {
		return fmt.Errorf("release name %q: no name provided", name)
	}
	if len(name) > maxReleaseNameLen || !validReleaseName.MatchString(name) {
		return fmt.Errorf("release name %q: invalid release name, must match regex %s and the length must not be longer than 53",
			name, validReleaseName.String())
	}
	return nil
}

// ignoreRule is one .helmignore line, with Helm's semantics (pkg/ignore).
type ignoreRule struct {
	pattern string
	negate  bool
	dirOnly bool
	// base rules (no slash) match the file's base name; others match the whole relative path.
	base bool
}

// readIgnoreRules parses .helmignore, when there is one, and appends Helm's default rule that
// ignores dotfiles in templates/.
func readIgnoreRules(file string) ([]ignoreRule, error) {
	var rules []ignoreRule
	data, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	lines := strings.Split(string(bytes.TrimPrefix(data, utf8BOM)), "\n")
	for _, line := range append(lines, "templates/.?*") {
		rule, ok, err := parseIgnoreRule(line)
		if err != nil {
			return nil, err
		}
		if ok {
			rules = append(rules, rule)
		}
	}
	return rules, nil
}

func parseIgnoreRule(line string) (ignoreRule, bool, error) {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return ignoreRule{}, false, nil
	}
	if strings.Contains(line, "**") {
		return ignoreRule{}, false, errors.New("double-star (**) syntax is not supported")
	}
	if _, err := filepath.Match(line, "abc"); err != nil {
		return ignoreRule{}, false, err
	}
	rule := ignoreRule{}
	if strings.HasPrefix(line, "!") {
		rule.negate, line = true, line[1:]
	}
	if strings.HasSuffix(line, "/") {
		rule.dirOnly, line = true, strings.TrimSuffix(line, "/")
	}
	rule.base = !strings.Contains(line, "/")
	rule.pattern = strings.TrimPrefix(line, "/")
	return rule, true, nil
}

// ignored evaluates the rules in order; the first match decides. Helm treats a negated rule
// oddly and faithfully reproduced here: any path it does not match is ignored.
func ignored(rules []ignoreRule, name string, isDir bool) bool {
	for _, rule := range rules {
		subject := name
		if rule.base {
			subject = path.Base(name)
		}
		matched, _ := filepath.Match(rule.pattern, subject)
		if rule.negate {
			if (rule.dirOnly && !isDir) || !matched {
				return true
			}
			continue
		}
		if rule.dirOnly && !isDir {
			continue
		}
		if matched {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------------------------
// Capabilities.

// Capabilities mirrors Helm's chartutil.Capabilities (.Capabilities in templates).
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
	HelmVersion BuildInfo
}

// KubeVersion mirrors Helm's chartutil.KubeVersion.
type KubeVersion struct {
	Version string
	Major   string
	Minor   string
}

// String is what {{ .Capabilities.KubeVersion }} prints.
func (kv *KubeVersion) String() string { return kv.Version }

// GitVersion is Helm's deprecated alias of Version, still used by charts.
func (kv *KubeVersion) GitVersion() string { return kv.Version }

// VersionSet mirrors Helm's chartutil.VersionSet.
type VersionSet []string

// Has reports whether the set holds apiVersion exactly ("apps/v1").
func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

// BuildInfo mirrors Helm's version.BuildInfo (.Capabilities.HelmVersion).
type BuildInfo struct {
	Version      string `json:"version,omitempty"`
	GitCommit    string `json:"git_commit,omitempty"`
	GitTreeState string `json:"git_tree_state,omitempty"`
	GoVersion    string `json:"go_version,omitempty"`
}

func newCapabilities(kubeVersion string, apiVersions []string) (*Capabilities, error) {
	if kubeVersion == "" {
		kubeVersion = defaultKubeVersion
	}
	kv, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return nil, fmt.Errorf("invalid kube version '%s': %s", kubeVersion, err)
	}
	return &Capabilities{
		KubeVersion: kv,
		APIVersions: append(append(VersionSet{}, defaultAPIVersions...), apiVersions...),
		HelmVersion: BuildInfo{Version: helmVersion, GitTreeState: "clean", GoVersion: runtime.Version()},
	}, nil
}

// parseKubeVersion reads a version as Kubernetes' version.ParseGeneric does: two or more numeric
// components, an optional leading v, and trailing text that is dropped.
func parseKubeVersion(s string) (KubeVersion, error) {
	parts := kubeVersionParts.FindStringSubmatch(s)
	if parts == nil {
		return KubeVersion{}, fmt.Errorf("could not parse %q as version", s)
	}
	components := strings.Split(parts[1], ".")
	if len(components) < 2 {
		return KubeVersion{}, fmt.Errorf("illegal version string %q", s)
	}
	numbers := make([]string, len(components))
	for i, component := range components {
		if i == 0 && strings.HasPrefix(component, "0") && component != "0" {
			return KubeVersion{}, fmt.Errorf("illegal zero-prefixed version component %q in %q", component, s)
		}
		n, err := strconv.ParseUint(component, 10, 0)
		if err != nil {
			return KubeVersion{}, fmt.Errorf("illegal non-numeric version component %q in %q: %v", component, s, err)
		}
		numbers[i] = strconv.FormatUint(n, 10)
	}
	return KubeVersion{Version: "v" + strings.Join(numbers, "."), Major: numbers[0], Minor: numbers[1]}, nil
}

func compatible(constraint, version string) bool {
	v, err := semver.NewVersion(version)
	if err != nil {
		return false
	}
	c, err := semver.NewConstraint(constraint)
	return err == nil && c.Check(v)
}

// ---------------------------------------------------------------------------------------------
// .Files (Helm's engine.files).

type files map[string][]byte

func newFiles(from []chartFile) files {
	f := files{}
	for _, file := range from {
		f[file.name] = file.data
	}
	return f
}

// GetBytes returns a file's content, or no bytes when the chart has no such file.
func (f files) GetBytes(name string) []byte {
	if data, ok := f[name]; ok {
		return data
	}
	return []byte{}
}

// Get returns a file's content as a string, or "" when the chart has no such file.
func (f files) Get(name string) string { return string(f.GetBytes(name)) }

// Glob returns the files whose path matches a gobwas/glob pattern with / as separator.
func (f files) Glob(pattern string) files {
	re, err := globRegexp(pattern)
	if err != nil {
		re = regexp.MustCompile(`^.*$`) // Helm falls back to "**" on a bad pattern
	}
	matched := files{}
	for name, data := range f {
		if re.MatchString(name) {
			matched[name] = data
		}
	}
	return matched
}

// AsConfig renders the files as ConfigMap data: base name to content, as YAML.
func (f files) AsConfig() string {
	if f == nil {
		return ""
	}
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYAML(m)
}

// AsSecrets renders the files as Secret data: base name to base64 content, as YAML.
func (f files) AsSecrets() string {
	if f == nil {
		return ""
	}
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = base64.StdEncoding.EncodeToString(data)
	}
	return toYAML(m)
}

// Lines splits a file into lines, without an empty last line for a trailing newline.
func (f files) Lines(name string) []string {
	if len(f[name]) == 0 {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(string(f[name]), "\n"), "\n")
}

// globRegexp translates gobwas/glob syntax (*, **, ?, [..], [!..], {a,b}, \ escapes; / as the
// separator that * and ? do not cross) into an anchored regular expression.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	runes := []rune(pattern)
	alternations := 0
	for i := 0; i < len(runes); i++ {
		switch c := runes[i]; {
		case c == '\\':
			if i++; i == len(runes) {
				return nil, errors.New("unexpected end of pattern after escape")
			}
			b.WriteString(regexp.QuoteMeta(string(runes[i])))
		case c == '*' && i+1 < len(runes) && runes[i+1] == '*':
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			end := i + 1
			for end < len(runes) && runes[end] != ']' {
				end++
			}
			if end == len(runes) {
				return nil, errors.New("unclosed character class")
			}
			class := runes[i+1 : end]
			b.WriteString("[")
			if len(class) > 0 && class[0] == '!' {
				b.WriteString("^")
				class = class[1:]
			}
			for _, r := range class {
				if r == '\\' || r == '[' || r == ']' || r == '^' {
					b.WriteRune('\\')
				}
				b.WriteRune(r)
			}
			b.WriteString("]")
			i = end
		case c == '{':
			alternations++
			b.WriteString("(?:")
		case c == '}' && alternations > 0:
			alternations--
			b.WriteString(")")
		case c == ',' && alternations > 0:
			b.WriteString("|")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	if alternations > 0 {
		return nil, errors.New("unclosed alternation")
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// ---------------------------------------------------------------------------------------------
// Rendering (Helm's engine.Engine.render).

// renderContext is the top-level data every template gets, keyed as Helm keys it.
func renderContext(ch *chart, values, release map[string]interface{}, caps *Capabilities) map[string]interface{} {
	return map[string]interface{}{
		// Helm passes chart.Metadata embedded in a struct that adds IsRoot.
		"Chart": struct {
			Metadata
			IsRoot bool
		}{*ch.metadata, true},
		"Files":        newFiles(ch.files),
		"Release":      release,
		"Capabilities": caps,
		"Values":       values,
		"Subcharts":    map[string]interface{}{},
	}
}

// renderTemplates parses every file under templates/ into one template set, so define and include
// work across files, then executes each file not starting with _ (partials). The result maps
// "<chart>/templates/<file>" to its output.
func renderTemplates(ch *chart, top map[string]interface{}) (rendered map[string]string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rendering template failed: %v", r)
		}
	}()
	root := template.New("gotpl")
	// Helm renders with missingkey=zero and then removes the "<no value>" Go still prints.
	root.Option("missingkey=zero")
	root.Funcs(funcMap(root, map[string]int{}))

	sources := map[string]string{}
	for _, f := range ch.templates {
		sources[path.Join(ch.metadata.Name, f.name)] = string(f.data)
	}
	names := templateOrder(sources)
	for _, name := range names {
		if _, err := root.New(name).Parse(sources[name]); err != nil {
			return nil, parseError(name, err)
		}
	}
	rendered = map[string]string{}
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") {
			continue
		}
		top["Template"] = map[string]interface{}{
			"Name":     name,
			"BasePath": path.Join(ch.metadata.Name, "templates"),
		}
		var out strings.Builder
		if err := root.ExecuteTemplate(&out, name, top); err != nil {
			return nil, execError(name, err)
		}
		rendered[name] = strings.ReplaceAll(out.String(), "<no value>", "")
	}
	return rendered, nil
}

// templateOrder is Helm's parse and render order: deepest paths first, then reverse lexical. It
// decides which of two same-named defines wins and which failing file is reported.
func templateOrder(sources map[string]string) []string {
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		di, dj := strings.Count(names[i], "/"), strings.Count(names[j], "/")
		if di != dj {
			return di > dj
		}
		return names[i] > names[j]
	})
	return names
}

// parseError reduces text/template's parse error to Helm's "parse error at (file:line): message".
func parseError(name string, err error) error {
	tokens := strings.Split(err.Error(), ": ")
	if len(tokens) == 1 {
		return fmt.Errorf("parse error in (%s): %s", name, err)
	}
	return fmt.Errorf("parse error at (%s): %s", tokens[1], tokens[len(tokens)-1])
}

// execError reduces an execution error carrying a required/fail message to Helm's
// "execution error at (file:line:col): message"; other errors pass through as Helm passes them.
func execError(name string, err error) error {
	var execErr template.ExecError
	if !errors.As(err, &execErr) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return fmt.Errorf("execution error in (%s): %s", name, err)
	}
	if parts := helmErrorMessage.FindStringSubmatch(tokens[2]); len(parts) >= 2 {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], parts[1])
	}
	return err
}

// funcMap is sprig's text function map as Helm v3.21 uses it, plus Helm's own functions.
func funcMap(root *template.Template, included map[string]int) template.FuncMap {
	f := sprig.TxtFuncMap()
	// Helm removes these so charts cannot read the environment of whoever renders them.
	delete(f, "env")
	delete(f, "expandenv")
	// Helm v3.21 ships sprig v3.3.0, which added sha512sum; Debian packages sprig v3.2.3.
	f["sha512sum"] = func(input string) string {
		sum := sha512.Sum512([]byte(input))
		return hex.EncodeToString(sum[:])
	}
	unsupported := func(name string) func(interface{}) (string, error) {
		return func(interface{}) (string, error) {
			return "", fmt.Errorf("%s is not supported by this renderer (no TOML library)", name)
		}
	}
	for name, fn := range map[string]interface{}{
		"toToml":        unsupported("toToml"),
		"fromToml":      unsupported("fromToml"),
		"toYaml":        toYAML,
		"toYamlPretty":  toYAMLPretty,
		"fromYaml":      fromYAML,
		"fromYamlArray": fromYAMLArray,
		"toJson":        toJSON,
		"fromJson":      fromJSON,
		"fromJsonArray": fromJSONArray,
		"include":       includeFunc(root, included),
		"tpl":           tplFunc(root, included),
		"required":      required,
		"fail":          fail,
		// helm template has no cluster: lookup finds nothing, and DNS lookups are off.
		"lookup": func(string, string, string, string) (map[string]interface{}, error) {
			return map[string]interface{}{}, nil
		},
		"getHostByName": func(string) string { return "" },
	} {
		f[name] = fn
	}
	return f
}

// includeFunc renders a named template into a string so it can be piped (nindent, quote, …).
// included counts nesting per name to stop runaway recursion as Helm does.
func includeFunc(t *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(name string, data interface{}) (string, error) {
		if included[name] > maxIncludeDepth {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
		}
		included[name]++
		defer func() { included[name]-- }()
		var out strings.Builder
		err := t.ExecuteTemplate(&out, name, data)
		return out.String(), err
	}
}

// tplFunc renders a string as a template against data, in a clone of the chart's template set so
// the string can include the chart's defines and define its own.
func tplFunc(parent *template.Template, included map[string]int) func(string, interface{}) (string, error) {
	return func(text string, data interface{}) (string, error) {
		t, err := parent.Clone()
		if err != nil {
			return "", fmt.Errorf("cannot clone template: %w", err)
		}
		// Clone drops the missingkey option (golang/go#43022); include and tpl must see the clone.
		t.Option("missingkey=zero")
		t.Funcs(template.FuncMap{"include": includeFunc(t, included), "tpl": tplFunc(t, included)})
		t, err = t.New(parent.Name()).Parse(text)
		if err != nil {
			return "", fmt.Errorf("cannot parse template %q: %w", text, err)
		}
		var out strings.Builder
		if err := t.Execute(&out, data); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %w", text, err)
		}
		return strings.ReplaceAll(out.String(), "<no value>", ""), nil
	}
}

// required fails the render with message when value is nil or the empty string.
func required(message string, value interface{}) (interface{}, error) {
	if s, ok := value.(string); value == nil || (ok && s == "") {
		return value, errors.New(errStart + message + errEnd)
	}
	return value, nil
}

// fail fails the render with message.
func fail(message string) (string, error) {
	return "", errors.New(errStart + message + errEnd)
}

// toYAML is Helm's toYaml: sigs.k8s.io/yaml output without the trailing newline, "" on error.
func toYAML(v interface{}) string {
	data, err := marshalYAML(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

// toYAMLPretty is Helm's toYamlPretty: yaml.v3 with two-space indentation.
func toYAMLPretty(v interface{}) string {
	var out bytes.Buffer
	encoder := yamlv3.NewEncoder(&out)
	encoder.SetIndent(2)
	if err := encoder.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(out.String(), "\n")
}

// fromYAML parses a YAML mapping; a parse error lands in the result's "Error" key, as in Helm.
func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := unmarshalYAML([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// fromYAMLArray parses a YAML sequence; a parse error becomes the only element.
func fromYAMLArray(s string) []interface{} {
	a := []interface{}{}
	if err := unmarshalYAML([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

// toJSON is Helm's toJson: "" on error.
func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

// fromJSON parses a JSON object; a parse error lands in the result's "Error" key.
func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

// fromJSONArray parses a JSON array; a parse error becomes the only element.
func fromJSONArray(s string) []interface{} {
	a := []interface{}{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

// ---------------------------------------------------------------------------------------------
// Output (Helm's action.renderResources, releaseutil.SortManifests and cmd/helm/template.go).

// takeNotes removes every rendered *NOTES.txt from rendered and returns the chart's own
// templates/NOTES.txt, which helm keeps for the release notes instead of the manifests.
func takeNotes(rendered map[string]string, chartName string) string {
	var notes string
	for name, text := range rendered {
		if strings.HasSuffix(name, notesSuffix) {
			if name == path.Join(chartName, "templates", notesSuffix) {
				notes = text
			}
			delete(rendered, name)
		}
	}
	return notes
}

type manifest struct {
	path    string
	content string
	kind    string
}

// head is the part of a manifest helm reads to sort it (releaseutil.SimpleHead).
type head struct {
	Version  string `json:"apiVersion"`
	Kind     string `json:"kind,omitempty"`
	Metadata *struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata,omitempty"`
}

// sortManifests splits each rendered file into documents (dropping empty ones), fails on a
// document that is not YAML, separates hooks, and orders both by kind as helm does.
func sortManifests(rendered map[string]string) (hooks, manifests []manifest, err error) {
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") || strings.TrimSpace(rendered[name]) == "" {
			continue
		}
		for _, doc := range manifestSeparator.Split(strings.TrimSpace(rendered[name]), -1) {
			if doc == "" {
				continue
			}
			doc = strings.TrimSpace(doc)
			var h head
			if err := unmarshalYAML([]byte(doc), &h); err != nil {
				return nil, nil, fmt.Errorf("YAML parse error on %s: %w", name, err)
			}
			m := manifest{path: name, content: doc, kind: h.Kind}
			if h.Metadata == nil || len(h.Metadata.Annotations) == 0 {
				manifests = append(manifests, m)
				continue
			}
			events, isHook := h.Metadata.Annotations[hookAnnotation]
			switch {
			case !isHook:
				manifests = append(manifests, m)
			case knownHook(events):
				hooks = append(hooks, m)
			default:
				warn("info: skipping unknown hook: %q", events)
			}
		}
	}
	return sortByKind(hooks), sortByKind(manifests), nil
}

func knownHook(events string) bool {
	for _, event := range strings.Split(events, ",") {
		if !hookEvents[strings.ToLower(strings.TrimSpace(event))] {
			return false
		}
	}
	return true
}

func sortByKind(manifests []manifest) []manifest {
	rank := map[string]int{}
	for i, kind := range installOrder {
		rank[kind] = i
	}
	sort.SliceStable(manifests, func(i, j int) bool {
		a, aKnown := rank[manifests[i].kind]
		b, bKnown := rank[manifests[j].kind]
		switch {
		case aKnown && bKnown:
			return a < b
		case aKnown != bKnown:
			return aKnown
		default:
			return manifests[i].kind < manifests[j].kind
		}
	})
	return manifests
}

// formatStream prints the stream exactly as helm template does: CRDs (when asked), manifests,
// then hooks, each preceded by "---" and a "# Source:" comment.
func formatStream(chartName string, crds []chartFile, manifests, hooks []manifest) string {
	var body strings.Builder
	for _, crd := range crds {
		writeDocument(&body, path.Join(chartName, crd.name), string(crd.data))
	}
	for _, m := range manifests {
		writeDocument(&body, m.path, m.content)
	}
	var out strings.Builder
	out.WriteString(strings.TrimSpace(body.String()) + "\n")
	for _, h := range hooks {
		writeDocument(&out, h.path, h.content)
	}
	return out.String()
}

func writeDocument(out *strings.Builder, source, content string) {
	fmt.Fprintf(out, "---\n# Source: %s\n%s\n", source, content)
}
