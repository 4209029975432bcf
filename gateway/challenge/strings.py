"""Every sentence the challenge and block pages show, in one place, per language.

Pages pick the first language of the client's Accept-Language that is listed here and
fall back to English. To add a language, copy the "en" block and translate the values;
``{placeholders}`` must stay as they are.
"""

from __future__ import annotations

import functools

STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "challenge_title": "Checking your browser",
        "challenge_heading": "One moment, please",
        "challenge_intro": "This site checks that its visitors are people and not automated scrapers. "
                           "The check is needed only once in a while.",
        "challenge_js": "Your browser is solving a small puzzle. This usually takes less than {seconds} seconds; you do not need to do anything.",
        "challenge_working": "Working…",
        "challenge_progress": "Working… {pct}%",
        "challenge_done": "Done. Taking you to the page…",
        "challenge_failed": "The check could not run in this browser. Reload the page to try again.",
        "post_lost": "The form you submitted was not sent. After this check, go back and submit it again.",
        "nojs_wait": "JavaScript is turned off, so this check uses a short wait instead of a puzzle: "
                     "you will be taken to the page in {seconds} seconds.",
        "nojs_button": "If nothing happens after {seconds} seconds, press Continue.",
        "nojs_continue": "Continue",
        "nojs_required": "JavaScript is turned off. This check needs JavaScript to run a short computation in your browser. "
                         "Please turn it on for this site, or use a browser that supports it.",
        "wait_title": "Please wait",
        "wait_heading": "Almost there",
        "wait_text": "The wait is not over yet. This page continues by itself in {seconds} seconds.",
        "request_id": "Reference",
        "contact": "If you think this is a mistake, contact",
        "appeal": "Ask for a review of this decision",
        "reason": "Reason",
        "reason_automated": "the request looked like automated traffic",
        "reason_attack": "the request looked like an attack",
        "reason_rate": "too many requests",
        "reason_policy": "the site's access policy",
        "block_title": "Access denied",
        "block_heading": "Access denied",
        "block_text": "This request was blocked by the site's security policy. If you are a person, nothing is wrong with you "
                      "or your device; give the reference below when you ask about it.",
        "rate_title": "Too many requests",
        "rate_heading": "Slow down, please",
        "rate_text": "Too many requests came from your network in a short time. Wait a minute, then try again.",
        "verified_title": "Check passed",
        "verified_heading": "Thank you, you may continue",
        "verified_resubmit": "Your earlier form submission was not sent. Go back and submit it again.",
        "verified_link": "Continue to the site",
        "post_kept": "The form you submitted is kept: it is sent once this check is done.",
        "post_resend": "Your form is being sent now. If nothing happens, send it with the button below.",
        "post_send": "Send the form",
        "failed_title": "Check failed",
        "failed_heading": "The check did not succeed",
        "failed_text": "The check could not be verified ({reason}). Load the page again to get a new one.",
        "failed_link": "Try again",
        "not_found": "Not found",
    },
    "de": {
        "challenge_title": "Browser wird geprüft",
        "challenge_heading": "Einen Moment bitte",
        "challenge_intro": "Diese Website prüft, ob ihre Besucher Menschen sind und keine automatischen Scraper. "
                           "Die Prüfung ist nur ab und zu nötig.",
        "challenge_js": "Ihr Browser löst eine kleine Rechenaufgabe. Das dauert meist weniger als {seconds} Sekunden; Sie müssen nichts tun.",
        "challenge_working": "Wird berechnet…",
        "challenge_progress": "Wird berechnet… {pct} %",
        "challenge_done": "Fertig. Sie werden weitergeleitet…",
        "challenge_failed": "Die Prüfung konnte in diesem Browser nicht laufen. Laden Sie die Seite neu, um es erneut zu versuchen.",
        "post_lost": "Das abgeschickte Formular wurde nicht übertragen. Gehen Sie nach dieser Prüfung zurück und senden Sie es erneut.",
        "nojs_wait": "JavaScript ist ausgeschaltet, daher verwendet diese Prüfung eine kurze Wartezeit statt einer Rechenaufgabe: "
                     "Sie werden in {seconds} Sekunden weitergeleitet.",
        "nojs_button": "Falls nach {seconds} Sekunden nichts passiert, drücken Sie auf Weiter.",
        "nojs_continue": "Weiter",
        "nojs_required": "JavaScript ist ausgeschaltet. Diese Prüfung braucht JavaScript für eine kurze Berechnung in Ihrem Browser. "
                         "Bitte schalten Sie es für diese Website ein.",
        "wait_title": "Bitte warten",
        "wait_heading": "Gleich geschafft",
        "wait_text": "Die Wartezeit ist noch nicht vorbei. Diese Seite geht in {seconds} Sekunden von selbst weiter.",
        "request_id": "Referenz",
        "contact": "Wenn Sie dies für einen Fehler halten, wenden Sie sich an",
        "appeal": "Überprüfung dieser Entscheidung anfragen",
        "reason": "Grund",
        "reason_automated": "die Anfrage sah nach automatisiertem Verkehr aus",
        "reason_attack": "die Anfrage sah nach einem Angriff aus",
        "reason_rate": "zu viele Anfragen",
        "reason_policy": "die Zugriffsrichtlinie der Website",
        "block_title": "Zugriff verweigert",
        "block_heading": "Zugriff verweigert",
        "block_text": "Diese Anfrage wurde durch die Sicherheitsrichtlinie der Website blockiert. Wenn Sie ein Mensch sind, stimmt mit "
                      "Ihnen und Ihrem Gerät alles; nennen Sie bei Nachfragen die Referenz unten.",
        "rate_title": "Zu viele Anfragen",
        "rate_heading": "Bitte langsamer",
        "rate_text": "Aus Ihrem Netz kamen in kurzer Zeit zu viele Anfragen. Warten Sie eine Minute und versuchen Sie es dann erneut.",
        "verified_title": "Prüfung bestanden",
        "verified_heading": "Danke, Sie können fortfahren",
        "verified_resubmit": "Ihr früheres Formular wurde nicht übertragen. Gehen Sie zurück und senden Sie es erneut.",
        "verified_link": "Weiter zur Website",
        "post_kept": "Das abgeschickte Formular bleibt erhalten: Es wird nach dieser Prüfung übertragen.",
        "post_resend": "Ihr Formular wird jetzt übertragen. Falls nichts geschieht, senden Sie es mit der Schaltfläche unten.",
        "post_send": "Formular senden",
        "failed_title": "Prüfung fehlgeschlagen",
        "failed_heading": "Die Prüfung war nicht erfolgreich",
        "failed_text": "Die Prüfung konnte nicht bestätigt werden ({reason}). Laden Sie die Seite erneut, um eine neue zu erhalten.",
        "failed_link": "Erneut versuchen",
        "not_found": "Nicht gefunden",
    },
    "fr": {
        "challenge_title": "Vérification du navigateur",
        "challenge_heading": "Un instant, s’il vous plaît",
        "challenge_intro": "Ce site vérifie que ses visiteurs sont des personnes et non des robots d’aspiration. "
                           "Cette vérification n’est demandée que de temps en temps.",
        "challenge_js": "Votre navigateur résout un petit calcul. Cela prend en général moins de {seconds} secondes ; vous n’avez rien à faire.",
        "challenge_working": "Calcul en cours…",
        "challenge_progress": "Calcul en cours… {pct} %",
        "challenge_done": "Terminé. Redirection vers la page…",
        "challenge_failed": "La vérification n’a pas pu s’exécuter dans ce navigateur. Rechargez la page pour réessayer.",
        "post_lost": "Le formulaire envoyé n’a pas été transmis. Après cette vérification, revenez en arrière et renvoyez-le.",
        "nojs_wait": "JavaScript est désactivé ; cette vérification utilise une courte attente au lieu d’un calcul : "
                     "vous serez redirigé dans {seconds} secondes.",
        "nojs_button": "Si rien ne se passe après {seconds} secondes, appuyez sur Continuer.",
        "nojs_continue": "Continuer",
        "nojs_required": "JavaScript est désactivé. Cette vérification a besoin de JavaScript pour un court calcul dans votre navigateur. "
                         "Activez-le pour ce site, s’il vous plaît.",
        "wait_title": "Veuillez patienter",
        "wait_heading": "Presque terminé",
        "wait_text": "L’attente n’est pas encore finie. Cette page continuera d’elle-même dans {seconds} secondes.",
        "request_id": "Référence",
        "contact": "Si vous pensez qu’il s’agit d’une erreur, contactez",
        "appeal": "Demander un réexamen de cette décision",
        "reason": "Motif",
        "reason_automated": "la requête ressemblait à du trafic automatisé",
        "reason_attack": "la requête ressemblait à une attaque",
        "reason_rate": "trop de requêtes",
        "reason_policy": "la politique d’accès du site",
        "block_title": "Accès refusé",
        "block_heading": "Accès refusé",
        "block_text": "Cette requête a été bloquée par la politique de sécurité du site. Si vous êtes une personne, ni vous ni votre "
                      "appareil n’êtes en cause ; indiquez la référence ci-dessous si vous nous contactez.",
        "rate_title": "Trop de requêtes",
        "rate_heading": "Doucement, s’il vous plaît",
        "rate_text": "Trop de requêtes sont venues de votre réseau en peu de temps. Attendez une minute, puis réessayez.",
        "verified_title": "Vérification réussie",
        "verified_heading": "Merci, vous pouvez continuer",
        "verified_resubmit": "Votre formulaire précédent n’a pas été transmis. Revenez en arrière et renvoyez-le.",
        "verified_link": "Continuer vers le site",
        "post_kept": "Le formulaire envoyé est conservé : il sera transmis une fois cette vérification terminée.",
        "post_resend": "Votre formulaire est en cours d’envoi. Si rien ne se passe, envoyez-le avec le bouton ci-dessous.",
        "post_send": "Envoyer le formulaire",
        "failed_title": "Échec de la vérification",
        "failed_heading": "La vérification n’a pas abouti",
        "failed_text": "La vérification n’a pas pu être confirmée ({reason}). Rechargez la page pour en obtenir une nouvelle.",
        "failed_link": "Réessayer",
        "not_found": "Introuvable",
    },
    "es": {
        "challenge_title": "Comprobando su navegador",
        "challenge_heading": "Un momento, por favor",
        "challenge_intro": "Este sitio comprueba que sus visitantes son personas y no programas automáticos de extracción. "
                           "La comprobación solo se pide de vez en cuando.",
        "challenge_js": "Su navegador está resolviendo un pequeño cálculo. Suele tardar menos de {seconds} segundos; no tiene que hacer nada.",
        "challenge_working": "Calculando…",
        "challenge_progress": "Calculando… {pct} %",
        "challenge_done": "Hecho. Le llevamos a la página…",
        "challenge_failed": "La comprobación no pudo ejecutarse en este navegador. Recargue la página para intentarlo de nuevo.",
        "post_lost": "El formulario que envió no se ha transmitido. Después de esta comprobación, vuelva atrás y envíelo de nuevo.",
        "nojs_wait": "JavaScript está desactivado, así que esta comprobación usa una breve espera en lugar de un cálculo: "
                     "irá a la página dentro de {seconds} segundos.",
        "nojs_button": "Si no ocurre nada pasados {seconds} segundos, pulse Continuar.",
        "nojs_continue": "Continuar",
        "nojs_required": "JavaScript está desactivado. Esta comprobación necesita JavaScript para un breve cálculo en su navegador. "
                         "Actívelo para este sitio, por favor.",
        "wait_title": "Espere, por favor",
        "wait_heading": "Casi listo",
        "wait_text": "La espera aún no ha terminado. Esta página continuará sola dentro de {seconds} segundos.",
        "request_id": "Referencia",
        "contact": "Si cree que se trata de un error, contacte con",
        "appeal": "Solicitar una revisión de esta decisión",
        "reason": "Motivo",
        "reason_automated": "la solicitud parecía tráfico automatizado",
        "reason_attack": "la solicitud parecía un ataque",
        "reason_rate": "demasiadas solicitudes",
        "reason_policy": "la política de acceso del sitio",
        "block_title": "Acceso denegado",
        "block_heading": "Acceso denegado",
        "block_text": "La política de seguridad del sitio ha bloqueado esta solicitud. Si es usted una persona, ni usted ni su "
                      "dispositivo tienen ningún problema; indique la referencia de abajo si pregunta por ello.",
        "rate_title": "Demasiadas solicitudes",
        "rate_heading": "Más despacio, por favor",
        "rate_text": "Llegaron demasiadas solicitudes desde su red en poco tiempo. Espere un minuto y vuelva a intentarlo.",
        "verified_title": "Comprobación superada",
        "verified_heading": "Gracias, puede continuar",
        "verified_resubmit": "Su envío de formulario anterior no se transmitió. Vuelva atrás y envíelo de nuevo.",
        "verified_link": "Continuar al sitio",
        "post_kept": "El formulario que envió se conserva: se transmitirá cuando termine esta comprobación.",
        "post_resend": "Su formulario se está enviando. Si no ocurre nada, envíelo con el botón de abajo.",
        "post_send": "Enviar el formulario",
        "failed_title": "Comprobación fallida",
        "failed_heading": "La comprobación no tuvo éxito",
        "failed_text": "No se pudo verificar la comprobación ({reason}). Cargue la página de nuevo para obtener una nueva.",
        "failed_link": "Intentar de nuevo",
        "not_found": "No encontrado",
    },
}


@functools.lru_cache(maxsize=1024)
def pick_language(accept_language: str) -> str:
    """The first language of an Accept-Language header that has strings here ("en" otherwise).

    Cached: clients send a handful of distinct headers, and every challenged request asks.
    """
    ranked = []
    for i, part in enumerate(accept_language.split(",")[:16]):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        ranked.append((-q, i, tag.strip().lower().split("-")[0]))
    for _, _, lang in sorted(ranked):
        if lang in STRINGS:
            return lang
    return "en"
