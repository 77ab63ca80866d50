using System.Security.Cryptography;
using System.Text;
using Microsoft.AspNetCore.Http;

namespace ExtHost;

/// <summary>
/// Function keys, enforced as the Functions host does with keys on, from the same settings as the
/// development host (devhost/src/http/FunctionKeys.ts), so one app setting turns them on for either:
/// `DEVHOST_MASTER_KEY` (the master key), `DEVHOST_HOST_KEYS` (comma-separated host keys),
/// `DEVHOST_FUNCTION_KEYS` (`name=key` pairs separated by `;` or `,`), `DEVHOST_SYSTEM_KEYS`
/// (`durabletask_extension=key` opens the Durable webhooks; the master key opens them too; with keys
/// on and none given, one is generated for the process). With none of the first three set, keys are
/// off and every route is open, like `func start`. A `function`-level route takes a function key,
/// a host key or the master key; `admin` only the master key; `anonymous` none. The key comes from
/// the `x-functions-key` header, else the `code` query parameter. Keys are compared in constant time
/// and never logged or echoed; a refused request is 401 with an empty body.
/// </summary>
public sealed class FunctionKeys
{
    public const string DurableSystemKeyName = "durabletask_extension";

    readonly string? master;
    readonly string[] hostKeys;
    readonly Dictionary<string, List<string>> functionKeys;
    readonly Dictionary<string, List<string>> systemKeys;

    /// <summary>True when the Durable system key had to be generated (other instances do not know it).</summary>
    public bool GeneratedSystemKey { get; }

    FunctionKeys(string? master, string[] hostKeys, Dictionary<string, List<string>> functionKeys, Dictionary<string, List<string>> systemKeys, bool generated)
    {
        this.master = master;
        this.hostKeys = hostKeys;
        this.functionKeys = functionKeys;
        this.systemKeys = systemKeys;
        GeneratedSystemKey = generated;
    }

    public static FunctionKeys FromEnvironment(Func<string, string?> setting)
    {
        string? master = setting("DEVHOST_MASTER_KEY")?.Trim();
        if (master == "") master = null;
        var hostKeys = (setting("DEVHOST_HOST_KEYS") ?? "").Split(',').Select(k => k.Trim()).Where(k => k != "").ToArray();
        var byFunction = NamedKeys(setting("DEVHOST_FUNCTION_KEYS"), "DEVHOST_FUNCTION_KEYS", "functionName");
        var system = NamedKeys(setting("DEVHOST_SYSTEM_KEYS"), "DEVHOST_SYSTEM_KEYS", "extensionName");
        bool enabled = master is not null || hostKeys.Length > 0 || byFunction.Count > 0;
        // The real host creates an extension's system key on first use; so does this one, per process.
        bool generate = enabled && !system.ContainsKey(DurableSystemKeyName);
        if (generate) system[DurableSystemKeyName] = [Convert.ToBase64String(RandomNumberGenerator.GetBytes(32)).TrimEnd('=').Replace('+', '-').Replace('/', '_')];
        return new FunctionKeys(master, hostKeys, byFunction, system, generate);
    }

    /// <summary>True when any key is configured (then function and admin levels are enforced).</summary>
    public bool Enabled => master is not null || hostKeys.Length > 0 || functionKeys.Count > 0;

    /// <summary>Whether the presented key (null when none was sent) opens a function of this level.</summary>
    public bool Authorize(string level, string functionName, string? presented)
    {
        if (level == "anonymous" || !Enabled) return true;
        if (string.IsNullOrEmpty(presented)) return false;
        if (master is not null && Same(presented, master)) return true;
        if (level == "admin") return false;
        if (hostKeys.Any(k => Same(presented, k))) return true;
        return functionKeys.TryGetValue(functionName.ToLowerInvariant(), out var keys) && keys.Any(k => Same(presented, k));
    }

    /// <summary>AuthorizationLevel.System: the named system key or the master key (always true with keys off).</summary>
    public bool AuthorizeSystem(string name, string? presented)
    {
        if (!Enabled) return true;
        if (string.IsNullOrEmpty(presented)) return false;
        if (master is not null && Same(presented, master)) return true;
        return systemKeys.TryGetValue(name.ToLowerInvariant(), out var keys) && keys.Any(k => Same(presented, k));
    }

    /// <summary>An extension's system key with keys on (null with keys off).</summary>
    public string? SystemKey(string name) =>
        Enabled && systemKeys.TryGetValue(name.ToLowerInvariant(), out var keys) ? keys.FirstOrDefault() : null;

    /// <summary>The host reads the key from `x-functions-key` first, then `code`.</summary>
    public static string? Presented(HttpRequest request)
    {
        if (request.Headers.TryGetValue("x-functions-key", out var header) && header.Count > 0) return header[0];
        return request.Query.TryGetValue("code", out var code) && code.Count > 0 ? code[0] : null;
    }

    /// <summary>The v4 library leaves authLevel unset when the app gives none; the host's default is function.</summary>
    public static string LevelOf(string? raw) => raw?.ToLowerInvariant() switch
    {
        "anonymous" => "anonymous",
        "admin" => "admin",
        _ => "function",
    };

    static bool Same(string a, string b) =>
        CryptographicOperations.FixedTimeEquals(Encoding.UTF8.GetBytes(a), Encoding.UTF8.GetBytes(b));

    /// <summary>`name=key` pairs separated by `;` or `,`, names case-insensitive; never echoes a pair (it holds a key).</summary>
    static Dictionary<string, List<string>> NamedKeys(string? value, string setting, string what)
    {
        var byName = new Dictionary<string, List<string>>();
        foreach (var pair in (value ?? "").Split(';', ','))
        {
            var trimmed = pair.Trim();
            if (trimmed == "") continue;
            int eq = trimmed.IndexOf('=');
            string name = eq > 0 ? trimmed[..eq].Trim().ToLowerInvariant() : "";
            string key = eq > 0 ? trimmed[(eq + 1)..].Trim() : "";
            if (name == "" || key == "") throw new InvalidOperationException($"{setting} must be \"{what}=key\" pairs separated by \";\".");
            if (!byName.TryGetValue(name, out var keys)) byName[name] = keys = [];
            keys.Add(key);
        }
        return byName;
    }
}
